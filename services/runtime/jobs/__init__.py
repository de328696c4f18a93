"""Durable background jobs (see :mod:`services.runtime.jobs.base`); the Redis store is :mod:`.redis`."""

from services.runtime.jobs.base import Handler, Jobs
from services.runtime.jobs.memory import MemoryJobs
from services.runtime.jobs.records import (
    FINISHED,
    JOB_ID,
    Cancelled,
    JobContext,
    JobNotFound,
    JobRecord,
    JobStoreFull,
    JobStoreUnavailable,
    LeaseLost,
    QueueFull,
    State,
    StoreMonitor,
)

__all__ = ["FINISHED", "JOB_ID", "Cancelled", "Handler", "JobContext", "JobNotFound", "JobRecord", "Jobs",
           "JobStoreFull", "JobStoreUnavailable", "LeaseLost", "MemoryJobs", "QueueFull", "State", "StoreMonitor"]
