"""Production traces in: OpenTelemetry/OpenInference, Phoenix, Langfuse and plain JSONL logs read into
queries, the live system's run and the document texts seen (`import_traces` writes the dataset folder)."""

from retbench.io.traces.flow import NEAR_RULE, SAMPLE_RULE, TraceImport, import_traces, query_key
from retbench.io.traces.model import Document, Feedback, Problem, ReadOut, Retrieval
from retbench.io.traces.read import FORMATS, read_file, read_traces

__all__ = [
    "FORMATS",
    "NEAR_RULE",
    "SAMPLE_RULE",
    "Document",
    "Feedback",
    "Problem",
    "ReadOut",
    "Retrieval",
    "TraceImport",
    "import_traces",
    "query_key",
    "read_file",
    "read_traces",
]
