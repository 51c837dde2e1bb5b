"""Built-in history filters and the pieces needed to write your own."""

from __future__ import annotations

from .backfill import TOOL_CALL_BACKFILL, backfill
from .base import FilterDefinition, FilterFunction, FilterRun
from .collapse import COLLAPSE_GROUP_REPLACER, CollapseOptions, collapse_groups, placeholder_for
from .files import FILE_CONTENTS_LIMITER, FileContentsOptions, limit_file_contents
from .importance import IMPORTANCE_RETENTION, ImportanceOptions, importance_score, retain_important
from .prune import PRUNE_MIDDLE, PruneMiddleOptions, prune_middle
from .size import SIZE_LIMITER, SizeLimiterOptions, limit_size, select_within_budget
from .ui import UI_COMPRESSION, UiCompressionOptions, compress_json, compress_ui

__all__ = [
    "COLLAPSE_GROUP_REPLACER",
    "FILE_CONTENTS_LIMITER",
    "IMPORTANCE_RETENTION",
    "PRUNE_MIDDLE",
    "SIZE_LIMITER",
    "TOOL_CALL_BACKFILL",
    "UI_COMPRESSION",
    "CollapseOptions",
    "FileContentsOptions",
    "FilterDefinition",
    "FilterFunction",
    "FilterRun",
    "ImportanceOptions",
    "PruneMiddleOptions",
    "SizeLimiterOptions",
    "UiCompressionOptions",
    "backfill",
    "collapse_groups",
    "compress_json",
    "compress_ui",
    "importance_score",
    "limit_file_contents",
    "limit_size",
    "placeholder_for",
    "prune_middle",
    "retain_important",
    "select_within_budget",
]
