"""Naming: the exposed names of downstream tools, prompts and resources, and resource
templates."""
