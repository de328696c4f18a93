"""Durable background jobs (see :mod:`services.runtime.jobs.base`); the Redis store is :mod:`.redis`."""

from services.runtime.jobs.base import (
    FINISHED,
    JOB_ID,
    Cancelled,
    Handler,
    JobContext,
    JobNotFound,
    JobRecord,
    Jobs,
    JobStoreUnavailable,
    LeaseLost,
    QueueFull,
    State,
    StoreMonitor,
)
from services.runtime.jobs.memory import MemoryJobs

__all__ = ["FINISHED", "JOB_ID", "Cancelled", "Handler", "JobContext", "JobNotFound", "JobRecord", "Jobs",
           "JobStoreUnavailable", "LeaseLost", "MemoryJobs", "QueueFull", "State", "StoreMonitor"]
