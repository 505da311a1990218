"""A public kit for people who extend retbench or test against it.

`retbench.testing.servers` starts the vector stores' real servers on loopback (PostgreSQL + pgvector,
Milvus Lite, Typesense, Chroma) in a temporary folder and stops them, so a plugin's tests, retbench's own
tests and the benchmarks use the same servers:

    from retbench.testing import start_postgres

    with start_postgres() as server:   # PostgreSQL 16 + pgvector on 127.0.0.1, a free port
        dsn = server.address  # a DSN without the password; server.env holds it
"""

from retbench.testing.servers import (
    LOOPBACK,
    LocalServer,
    free_port,
    listening_addresses,
    start_chroma,
    start_milvus,
    start_postgres,
    start_typesense,
)

__all__ = [
    "LOOPBACK",
    "LocalServer",
    "free_port",
    "listening_addresses",
    "start_chroma",
    "start_milvus",
    "start_postgres",
    "start_typesense",
]
