"""Lowering's tables and readers: the ops as data, their reductions and views, node and dtype helpers."""
