"""`retbench serve`: a retriever (and optionally a reranker) over HTTP, loopback by default."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from retbench.cli.app import fail, handles_errors, json_object


@handles_errors
def serve_command(
    dataset: Annotated[
        str | None,
        typer.Argument(help="Corpus to index: a shipped dataset name (e.g. scifact) or a BEIR folder."),
    ] = None,
    adapter: Annotated[str, typer.Option(help="Retriever adapter (a built-in name or module:factory).")] = "bm25s",
    params: Annotated[str, typer.Option(help="Adapter parameters as a JSON object.")] = "{}",
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one; the URL is printed).")] = 8000,
    include_text: Annotated[bool, typer.Option(help="Return each document's text with its id and score.")] = False,
    verbose: Annotated[bool, typer.Option(help="Log every request.")] = False,
    backlog: Annotated[
        int, typer.Option(help="Listen backlog: connections queued while all threads are busy (>= your concurrency).")
    ] = 1024,
    timeout: Annotated[
        float,
        typer.Option(help="Seconds a client gets to send a whole request (a silent or drip-feeding one is let go)."),
    ] = 30.0,
    rerank: Annotated[
        str | None,
        typer.Option(help="Also serve a reranker at /rerank: cross_encoder, bi_encoder, http or module:factory."),
    ] = None,
    rerank_params: Annotated[str, typer.Option(help="Reranker parameters as a JSON object.")] = "{}",
    max_documents: Annotated[int, typer.Option(help="Most documents one /rerank request may send.")] = 1000,
) -> None:
    """Serve a retriever over HTTP: POST /search {"query", "k"} -> {"retrieved": [{"id", "score"}]};
    with --rerank (and no dataset, if you like) also POST /rerank {"query", "documents", "top_n"}."""
    from retbench.serve import RetrievalServer, serve_dataset

    options, rr_options = json_object(params, "--params"), json_object(rerank_params, "--rerank-params")
    if dataset is None and rerank is None:
        raise fail("give a dataset to serve /search, --rerank to serve /rerank, or both")
    reranker = None
    if rerank is not None:
        from retbench.retrievers.rerank import create_reranker

        reranker = create_reranker(rerank, rr_options, where="--rerank-params")
    if backlog < 1 or not timeout > 0:
        raise fail("--backlog must be at least 1 and --timeout positive")
    if max_documents < 1:
        raise fail("--max-documents must be at least 1")
    if dataset is not None:
        server = serve_dataset(
            dataset,
            adapter,
            options,
            host=host,
            port=port,
            include_text=include_text,
            verbose=verbose,
            backlog=backlog,
            timeout=timeout,
        )
        server.reranker = reranker
        server.max_documents = max_documents
        typer.echo(f"serving {adapter} over {dataset} at {server.url}", err=False)
    else:
        server = RetrievalServer(
            reranker=reranker,
            host=host,
            port=port,
            verbose=verbose,
            backlog=backlog,
            timeout=timeout,
            max_documents=max_documents,
        )
    if reranker is not None:
        typer.echo(f"serving reranker {rerank} at {server.rerank_url}", err=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.stop()
