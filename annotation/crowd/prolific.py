"""Prolific's researcher API over plain HTTPS (``Authorization: Token …``): sync a study's submissions
with our worker sessions, approve or reject them. The token is the PROLIFIC_TOKEN setting (from the environment
variable of that name, config/settings.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from django.conf import settings

from annotation.errors import ServiceError
from annotation.models import ExternalLink, Study, WorkerSession

REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)


class ProlificError(ServiceError):
    """Prolific refused (``status``: its HTTP status) or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, token: str | None = None, base_url: str | None = None, timeout: float = 30.0):
        self.token = token or settings.PROLIFIC_TOKEN
        if not self.token:
            raise ProlificError("Set PROLIFIC_TOKEN to your Prolific API token.")
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            url,
            data=data,
            method=method,
            headers={
                "Authorization": f"Token {self.token}",
                "Accept": "application/json",
                **({"Content-Type": "application/json"} if data is not None else {}),
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:  # noqa: S310 (URL is ours)
                payload = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise ProlificError(f"Prolific answered {exc.code} to {method} {path}: {detail}", exc.code) from None
        except urllib.error.URLError as exc:
            raise ProlificError(f"Prolific could not be reached: {exc.reason}") from None
        return json.loads(payload) if payload else {}

    def submissions(self, prolific_study_id: str) -> list[dict]:
        out: list[dict] = []
        path: str | None = f"/api/v1/studies/{prolific_study_id}/submissions/"
        while path:
            page = self.request("GET", path)
            out.extend(page.get("results", []))
            path = ((page.get("_links") or {}).get("next") or {}).get("href")
        return out

    def submission(self, submission_id: str) -> dict:
        """One submission as Prolific knows it (its ``study_id``, ``participant_id``, ``status``)."""
        return self.request("GET", f"/api/v1/submissions/{submission_id}/")

    def approve(self, submission_id: str) -> dict:
        return self.request("POST", f"/api/v1/submissions/{submission_id}/transition/", {"action": "APPROVE"})

    def reject(self, submission_id: str, message: str, category: str) -> dict:
        if category not in REJECTION_CATEGORIES:
            raise ProlificError(f"rejection category must be one of {', '.join(REJECTION_CATEGORIES)}")
        if len(message.strip()) < 100:
            raise ProlificError("Prolific needs a rejection message of at least 100 characters explaining why.")
        return self.request(
            "POST",
            f"/api/v1/submissions/{submission_id}/transition/",
            {"action": "REJECT", "message": message, "rejection_category": category},
        )

    def set_up_bonus(self, prolific_study_id: str, submission_id: str, amount) -> str:
        """A bonus of ``amount`` (in the study's currency, e.g. 1.50) for one submission, set up but not paid;
        Prolific's id for it (what ``pay_bonus`` pays)."""
        answer = self.request(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            {"study_id": prolific_study_id, "csv_bonuses": f"{submission_id},{amount}\n"},
        )
        bulk_id = answer.get("id")
        if not isinstance(bulk_id, str) or not bulk_id:
            raise ProlificError("Prolific set up the bonus but gave no id to pay it with.")
        return bulk_id

    def pay_bonus(self, bulk_id: str) -> dict:
        """Pay a bonus set up by ``set_up_bonus``. Not idempotent on Prolific's side: call it once per bonus."""
        return self.request("POST", f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/", {})


def do_sync_submissions(client: Client, study: Study, prolific_study_id: str) -> list[dict]:
    """Prolific's submissions matched to our sessions (by SESSION_ID), with our completion status and
    whether the code they entered is the one we gave; the site's status is stored on the session."""
    rows = []
    for sub in client.submissions(prolific_study_id):
        session = (
            WorkerSession.objects.filter(
                link__study=study, link__platform=ExternalLink.Platform.PROLIFIC, session_key=sub.get("id", "")
            )
            .select_related("assignment")
            .first()
        )
        if session is not None and session.platform_status != sub.get("status", ""):
            session.platform_status = sub.get("status", "")
            session.save(update_fields=["platform_status"])
        ours = session.assignment if session else None
        rows.append(
            {
                "submission_id": sub.get("id"),
                "participant_id": sub.get("participant_id"),
                "status": sub.get("status"),
                "answered": bool(ours and ours.status == "completed"),
                "code_matches": bool(ours and sub.get("study_code") == ours.completion_code),
            }
        )
    return rows
