# Loaded by Python at start-up because mototest puts this file's directory
# first on PYTHONPATH when it runs moto_server. It makes moto handle one
# request at a time: moto's DynamoDB backend is not safe for concurrent
# requests (a cancelled TransactWriteItems restores a copy of the tables
# taken when it began, erasing concurrent writes). Connections are still
# accepted concurrently by the threaded server.
import threading

try:
    from moto.moto_server import werkzeug_app as _werkzeug_app
except Exception:  # not moto_server, or another moto layout: do nothing
    _werkzeug_app = None

if _werkzeug_app is not None:
    _lock = threading.Lock()
    _call = _werkzeug_app.DomainDispatcherApplication.__call__

    def _serialized_call(self, environ, start_response):
        with _lock:
            # Materialise the body inside the lock, in case the app
            # returns a lazy iterable that still does work.
            return list(_call(self, environ, start_response))

    _werkzeug_app.DomainDispatcherApplication.__call__ = _serialized_call
    _werkzeug_app.MOTOTEST_SERIALIZED = True
