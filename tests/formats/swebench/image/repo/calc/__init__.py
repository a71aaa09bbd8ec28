"""A tiny calculator: the repository the SWE-bench format tests grade patches in."""
