"""The labelling page: people grade a study's pooled pairs in a browser (`retbench label serve STUDY`).

A Starlette app (`app`) served by uvicorn on loopback (`server`); the page, its script and its style are package
files (`static/`), so nothing is fetched from elsewhere. The app has no logic of its own: pairs and estimates come
from the study (`retbench.studies.labels`), labels go to the label log.
"""
