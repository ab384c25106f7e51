"""Questions a Larkspur customer asks, each answered by one document of the corpus."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Question:
    """A question, the document that answers it, and the answer's key fact."""

    text: str
    doc_id: str
    fact: str
    """A verbatim phrase of the answering document that a right answer contains."""


QUESTIONS: tuple[Question, ...] = (
    Question(
        "Which operating systems does the Larkspur desktop app run on?",
        "manual-install",
        "Windows 10 or later",
    ),
    Question(
        "How much free disk space does the Larkspur installer need?", "manual-install", "400 MB"
    ),
    Question(
        "How many extra folders can I add per device to sync?",
        "manual-sync-folders",
        "up to 20 extra folders",
    ),
    Question(
        "Do folders excluded with selective sync count towards my storage quota?",
        "manual-selective-sync",
        "still count towards your storage quota",
    ),
    Question("How long are file versions kept on the Team plan?", "manual-versioning", "180 days"),
    Question(
        "How many versions does Larkspur keep for each file?", "manual-versioning", "100 versions"
    ),
    Question("How long does the Trash keep deleted files?", "manual-trash", "60 days"),
    Question("When do sharing links expire?", "manual-sharing", "14 days"),
    Question(
        "Can admins require a password on every sharing link?",
        "manual-sharing",
        "require a password",
    ),
    Question("Which second factors does two-factor authentication support?", "manual-2fa", "FIDO2"),
    Question(
        "How many recovery codes come with two-factor authentication?",
        "manual-2fa",
        "10 single-use recovery codes",
    ),
    Question("How often are encryption keys rotated?", "manual-encryption", "every 90 days"),
    Question(
        "Can Business customers bring their own encryption key?",
        "manual-encryption",
        "AWS KMS or Azure Key Vault",
    ),
    Question(
        "How many changes does the desktop app queue while offline?",
        "manual-offline",
        "50,000 queued changes",
    ),
    Question(
        "What happens when the same file was edited on two devices?",
        "manual-offline",
        "keeps both copies",
    ),
    Question("Which iOS and Android versions does the mobile app need?", "manual-mobile", "iOS 16"),
    Question("How do I pause syncing with the lark command-line tool?", "manual-cli", "lark pause"),
    Question(
        "What is the API rate limit per token in requests per minute?",
        "manual-api",
        "600 requests per minute",
    ),
    Question("What happens to API requests over the rate limit?", "manual-api", "HTTP status 429"),
    Question("Which port does LAN sync use?", "manual-bandwidth", "port 47123"),
    Question(
        "How long does the audit log keep events on the Business plan?",
        "manual-roles",
        "7 years",
    ),
    Question(
        "Which identity providers has single sign-on been tested with?",
        "manual-sso",
        "Okta",
    ),
    Question(
        "How quickly does SCIM provisioning apply a change from the identity provider?",
        "manual-sso",
        "within 10 minutes",
    ),
    Question("When was Larkspur 4.0 released?", "release-4.0", "March 12, 2024"),
    Question(
        "When was Larkspur 4.2 released, and what did it add?",
        "release-4.2",
        "July 30, 2024",
    ),
    Question(
        "When was Larkspur 4.3 released and what did it change in the offline queue?",
        "release-4.3",
        "October 8, 2024",
    ),
    Question(
        "When was Larkspur 5.0 released and what did it remove?",
        "release-5.0",
        "January 21, 2025",
    ),
    Question(
        "Which advisory about a crafted sharing link does version 5.1.2 fix?",
        "release-5.1.2",
        "LSA-2025-004",
    ),
    Question("When was Larkspur 5.1 released?", "release-5.1", "April 15, 2025"),
    Question(
        "When was the Larkspur 5.1.2 security update released?", "release-5.1.2", "May 6, 2025"
    ),
    Question(
        "Since when can desktop clients older than version 4.0 no longer connect?",
        "policy-version-support",
        "February 1, 2025",
    ),
    Question(
        "When was Larkspur 5.2 with the Activity panel released?",
        "release-5.2",
        "September 2, 2025",
    ),
    Question("How much does the Team plan cost per user?", "pricing-plans", "$11 per user"),
    Question("What does the Business plan cost per month?", "pricing-plans", "$19 per user"),
    Question("How much storage does the Solo plan include?", "pricing-storage", "1 TB"),
    Question(
        "What is the largest single file I can store on the Business plan?",
        "pricing-storage",
        "250 GB on Business",
    ),
    Question("How much do I save by paying annually?", "pricing-billing", "15%"),
    Question(
        "Do registered charities and schools get a discount?", "pricing-billing", "40% discount"
    ),
    Question(
        "Can I get a full refund after cancelling a new subscription?",
        "policy-refunds",
        "within 30 days of the first payment",
    ),
    Question(
        "How long does my account stay readable after I cancel my subscription?",
        "policy-cancellation",
        "45 days",
    ),
    Question("When is live chat support staffed?", "policy-support", "08:00 to 20:00 UTC"),
    Question(
        "How quickly are urgent tickets from Business customers answered?",
        "policy-response-times",
        "within 1 hour",
    ),
    Question(
        "What credit do I receive if monthly uptime falls below 99.9%?",
        "policy-uptime",
        "credit of 10%",
    ),
    Question(
        "Until when does Larkspur 4.x receive security updates?",
        "policy-version-support",
        "September 2025",
    ),
    Question(
        "Which data centres does the European Union region use?",
        "policy-data-location",
        "Frankfurt and Dublin",
    ),
    Question("Who is the chief executive of Fernhollow Software?", "company-about", "Maren Okafor"),
)
