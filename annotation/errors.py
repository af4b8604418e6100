"""The errors a user can cause, shown to them as they are (every wing raises these; views turn them into
messages or refusals)."""

from __future__ import annotations


class ServiceError(Exception):
    """An error a user caused; the message is shown to them as it is."""


class AllocationBusy(ServiceError):
    pass


class RaterScreenedOut(ServiceError):
    """The rater failed the study's attention checks and gets no more work."""


class RaterLimitReached(ServiceError):
    """The rater has done the study's maximum number of assignments."""


class NetworkHoldsEnough(ServiceError):
    """Crowd workers or open-link visitors from the rater's network already hold as many unanswered places as one
    network may (``UNANSWERED_PER_CLIENT``)."""


class FieldErrors(ServiceError):
    """Values refused by field (a form's or a JSON body's): ``errors`` maps each refused field to what is wrong."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
