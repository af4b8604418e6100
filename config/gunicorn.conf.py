"""gunicorn settings for production (README, "Production deployment"):

    gunicorn -c config/gunicorn.conf.py config.wsgi:application

Command-line options and GUNICORN_CMD_ARGS override these. bench/load_raters.py measures this setup.
"""

import os

workers = int(os.environ.get("WEB_WORKERS", "3"))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "16"))
preload_app = True  # load Django (and numpy/scipy) once, fork the workers
keepalive = 30  # seconds: a rater's browser reuses its connection from one pair to the next
graceful_timeout = 20
accesslog = os.environ.get("WEB_ACCESS_LOG", "-") or None  # "-" is stdout, empty turns it off
logger_class = "config.gunicorn_logging.RedactingLogger"  # no link tokens or credentials in the access log


# Garbage collection and preloading (see the gc.freeze documentation): the master loads Django once
# with the collector off, freezes everything it allocated right before forking, and each worker turns
# the collector back on. Full collections then no longer walk the ~140k long-lived objects of the
# loaded app on every request burst (a 50-180 ms pause each, the tail of bench/load_raters.py), and
# forked workers keep sharing those pages instead of copying them.
def on_starting(server):
    import gc

    gc.disable()


def pre_fork(server, worker):
    import gc

    gc.freeze()


def post_fork(server, worker):
    import gc

    gc.enable()
