# Loaded by Python at start-up (after sitecustomize) when this directory is
# on PYTHONPATH: bench/awsbench's TestMain puts it there for the
# moto_server its tests and benchmarks start (internal/mototest keeps
# PYTHONPATH). It removes two per-message costs of moto's SQS that make a
# queue of n messages cost O(n) slow steps for every message sent,
# received or deleted, without changing what moto answers:
#
#   - moto.sqs.models computes "now" for every message it looks at (is it
#     visible? delayed?) as datetime arithmetic, utcnow() - utcfromtimestamp(0)
#     (a few microseconds each, 3 to 4 calls per message per pass over the
#     queue). time.time() is the same number (seconds since the epoch).
#   - receive_message checks each message's retention through
#     get_queue_attributes, which computes every attribute of the queue,
#     the approximate message counts included (three passes over the
#     queue, three times): the check needs only MessageRetentionPeriod.
#
# A 10,000-message queue made each ReceiveMessage cost moto about a second
# of CPU (bench/README.md, stop 34). The passes themselves remain (O(n)
# cheap steps). Set AWSBENCH_MOTO_PATCH=off to run moto as shipped.
import os
import time

if os.environ.get("AWSBENCH_MOTO_PATCH", "on") != "off":
    try:
        import moto.sqs.models as _sqs
    except Exception:  # not moto, or another layout: do nothing
        _sqs = None
    if _sqs is not None and hasattr(_sqs, "unix_time") and hasattr(_sqs, "unix_time_millis"):
        _unix_time, _unix_time_millis = _sqs.unix_time, _sqs.unix_time_millis

        def unix_time(dt=None):
            return time.time() if dt is None else _unix_time(dt)

        def unix_time_millis(dt=None):
            return time.time() * 1000.0 if dt is None else _unix_time_millis(dt)

        _sqs.unix_time, _sqs.unix_time_millis = unix_time, unix_time_millis

        def _retained(self, queue_name, message):
            period = int(self.get_queue(queue_name).message_retention_period)
            return period + message.sent_timestamp / 1000 > unix_time()

        if hasattr(_sqs.SQSBackend, "is_message_valid_based_on_retention_period"):
            _sqs.SQSBackend.is_message_valid_based_on_retention_period = _retained
        _sqs.AWSBENCH_PATCHED = True
