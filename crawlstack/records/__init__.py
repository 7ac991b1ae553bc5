"""Records: merging a seed's fields across pages, values every store can hold, and the query tables."""
