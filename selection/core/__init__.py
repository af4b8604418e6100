"""Pure numerical core of the selection app: numpy/scipy in, numpy out, no Django."""
