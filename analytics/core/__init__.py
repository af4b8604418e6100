"""Pure numerical core of the analytics app: numpy/scipy in, numpy out, no Django."""
