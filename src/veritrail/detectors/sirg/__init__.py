"""SIRG: hallucination detection from a white-box generator's semantic-level internal reasoning
graph (token relevance by AttnLRP or Input×Gradient, aggregated to fragments, classified).

Needs the ``sirg`` extra (torch, transformers, spaCy); see docs/sirg.md.
"""

from .analysis import Analysis, Example, analyse
from .attribution import Method, relevance_rows
from .cache import AnalysisCache
from .classifier import FragmentClassifier, PairExample, response_flag
from .detector import REPORT_KEY, Detection, Detector, DetectorConfig, detect
from .graph import EdgeSelection, ReasoningGraph, build_graph, graph_from_dict, graph_to_dict
from .models import LoadedLM, build_tiny, load_default, load_model

__all__ = [
    "REPORT_KEY",
    "Analysis",
    "AnalysisCache",
    "Detection",
    "Detector",
    "DetectorConfig",
    "EdgeSelection",
    "Example",
    "FragmentClassifier",
    "LoadedLM",
    "Method",
    "PairExample",
    "ReasoningGraph",
    "analyse",
    "build_graph",
    "build_tiny",
    "detect",
    "graph_from_dict",
    "graph_to_dict",
    "load_default",
    "load_model",
    "relevance_rows",
    "response_flag",
]
