"""Retrievers behind one interface (see `base.py`)."""

from retbench.retrievers.base import CapabilityError, Retriever, available, create, register

__all__ = ["CapabilityError", "Retriever", "available", "create", "register"]
