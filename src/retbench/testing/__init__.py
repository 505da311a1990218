"""A public kit for people who extend retbench or test against it.

`check_retriever(factory, corpus)` checks a retriever against the contract every built-in adapter keeps
(ranks, ids, scores, failures recorded, inputs untouched, and add / replace / delete, save / load and
filters where the adapter declares them); see `retbench.testing.contract`.

`retbench.testing.servers` starts the vector stores' real servers on loopback (PostgreSQL + pgvector,
Milvus Lite, Typesense, Chroma) in a temporary folder and stops them, so a plugin's tests, retbench's own
tests and the benchmarks use the same servers:

    from retbench.testing import start_postgres

    with start_postgres() as server:   # PostgreSQL 16 + pgvector on 127.0.0.1, a free port
        dsn = server.address  # a DSN without the password; server.env holds it
"""

from retbench.loopback import LOOPBACK, free_port, listening_addresses, stop_process
from retbench.testing.contract import ContractError, check_retriever
from retbench.testing.servers import LocalServer, start_chroma, start_milvus, start_postgres, start_typesense

__all__ = [
    "LOOPBACK",
    "ContractError",
    "LocalServer",
    "check_retriever",
    "free_port",
    "listening_addresses",
    "start_chroma",
    "start_milvus",
    "start_postgres",
    "start_typesense",
    "stop_process",
]
