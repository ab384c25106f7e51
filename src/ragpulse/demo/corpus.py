"""The demo's knowledge base: documentation of Larkspur, a fictional file-sync service.

A product manual, release notes and the pricing, limits and support policies,
each a short document of self-contained sentences full of the facts RAG answers
get wrong: prices, limits, version numbers, dates and names. Every fact here is
invented; the company, product and people do not exist.

``UNSUPPORTED`` holds, per document, statements a model could plausibly produce
"from memory": they sound like the document but no document states them. The
fault injector appends them to answers to simulate a hallucination.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Section = Literal["manual", "release-notes", "policy"]


@dataclass(frozen=True, slots=True)
class Document:
    """One page of the knowledge base."""

    id: str
    title: str
    section: Section
    text: str

    @property
    def content(self) -> str:
        """What the retriever indexes: the title, then the text."""
        return f"{self.title}. {self.text}"


DOCUMENTS: tuple[Document, ...] = (
    # --- Product manual -----------------------------------------------------
    Document(
        "manual-install",
        "Installing the Larkspur desktop app",
        "manual",
        "The Larkspur desktop app runs on Windows 10 or later, macOS 12 Monterey or later, "
        "and Ubuntu 22.04 or later. The installer needs 400 MB of free disk space and an "
        "internet connection for the first sign-in. On Linux, Larkspur is distributed as a "
        "Debian package and as a Flatpak. The desktop app checks for updates every 6 hours "
        "and installs them at the next restart.",
    ),
    Document(
        "manual-sync-folders",
        "Choosing folders to sync",
        "manual",
        "By default Larkspur syncs the Larkspur folder in your home directory. You can add "
        "up to 20 extra folders per device from the Folders page of the sync settings. Files "
        "larger than the file size limit of your plan are skipped and listed under Sync "
        "issues. Symbolic links are not followed; Larkspur syncs the link itself.",
    ),
    Document(
        "manual-selective-sync",
        "Selective sync",
        "manual",
        "Selective sync keeps a folder in the cloud without downloading it to a device. "
        "Folders excluded with selective sync still count towards your storage quota. A "
        "device can exclude at most 500 folders from syncing. Changes to selective sync "
        "settings take effect within 2 minutes.",
    ),
    Document(
        "manual-versioning",
        "File version history",
        "manual",
        "Larkspur keeps previous versions of every file automatically. Versions are kept for "
        "30 days on the Solo plan, for 180 days on the Team plan and for 365 days on the "
        "Business plan. Each file keeps at most 100 versions, and the oldest version is "
        "dropped when a new one arrives. Restoring a version creates a new version, so a "
        "restore can itself be undone.",
    ),
    Document(
        "manual-trash",
        "Restoring deleted files",
        "manual",
        "Deleted files go to the Trash in the Larkspur web app. The Trash keeps deleted files "
        "for 60 days on every plan. Only the file owner or a team admin can restore a file "
        "from the Trash. Files emptied from the Trash cannot be recovered, not even by "
        "Fernhollow support.",
    ),
    Document(
        "manual-sharing",
        "Sharing links",
        "manual",
        "Any file or folder can be shared with a link from the web app or the desktop app. "
        "Sharing links expire after 14 days by default, and the owner can set any expiry up "
        "to 365 days. Business plan admins can require a password on every sharing link. A "
        "single sharing link can be opened 5,000 times per day before it is rate limited.",
    ),
    Document(
        "manual-2fa",
        "Two-factor authentication",
        "manual",
        "Larkspur supports two-factor authentication with authenticator apps and with FIDO2 "
        "security keys. SMS codes were removed as a second factor in version 5.0. Team admins "
        "can make two-factor authentication mandatory for all members. Each account receives "
        "10 single-use recovery codes when two-factor authentication is turned on.",
    ),
    Document(
        "manual-encryption",
        "Encryption",
        "manual",
        "Files are encrypted in transit with TLS 1.3 and at rest with AES-256. Encryption "
        "keys are rotated every 90 days. Business plan customers can bring their own "
        "encryption key through AWS KMS or Azure Key Vault. Fernhollow staff cannot read file "
        "contents without a support grant from the account owner.",
    ),
    Document(
        "manual-offline",
        "Working offline",
        "manual",
        "The desktop app keeps working without a connection and queues changes locally. Up "
        "to 50,000 queued changes are kept while the device is offline. When the connection "
        "returns, queued changes are uploaded oldest first. If the same file was edited on "
        "two devices, Larkspur keeps both copies and marks the second one as a conflicted "
        "copy.",
    ),
    Document(
        "manual-mobile",
        "Mobile apps",
        "manual",
        "The Larkspur mobile app is available for iOS 16 or later and Android 11 or later. "
        "Camera upload saves new photos to the Camera Uploads folder over Wi-Fi only, unless "
        "mobile data is allowed in the settings. The mobile app can keep up to 2 GB of files "
        "available offline. The passcode lock locks the mobile app after 5 minutes in the "
        "background by default.",
    ),
    Document(
        "manual-cli",
        "Command-line tool",
        "manual",
        "The lark command-line tool is installed with the desktop app from version 4.2 "
        "onwards. The command lark status shows the sync state of the current folder. The "
        "command lark pause followed by a duration pauses syncing, for example for 30 "
        "minutes. The command-line tool reads its settings from the file larkspur.toml in "
        "the configuration folder.",
    ),
    Document(
        "manual-api",
        "REST API and rate limits",
        "manual",
        "The Larkspur REST API is available on the Team and Business plans. Each API token "
        "may make 600 requests per minute, and bursts of up to 100 requests are accepted. "
        "Requests over the rate limit receive HTTP status 429 with a Retry-After header. API "
        "tokens expire after 90 days unless an admin creates them as service tokens.",
    ),
    Document(
        "manual-bandwidth",
        "Bandwidth and LAN sync",
        "manual",
        "The desktop app uploads at full speed unless a limit is set in the network "
        "settings. Upload and download limits can be set separately, in steps of 64 KB/s. "
        "LAN sync copies files directly between devices on the same network using port "
        "47123. LAN sync is turned off by default on the Business plan.",
    ),
    Document(
        "manual-roles",
        "Team roles and the audit log",
        "manual",
        "A Larkspur team has three roles: owner, admin and member. Each team has exactly one "
        "owner, and only the current owner can transfer ownership. Admins can invite and "
        "remove members, reset two-factor authentication and read the audit log. The audit "
        "log keeps events for 1 year on the Team plan and for 7 years on the Business plan.",
    ),
    Document(
        "manual-sso",
        "Single sign-on and SCIM",
        "manual",
        "Single sign-on with SAML 2.0 is available on the Business plan. Larkspur single "
        "sign-on has been tested with Okta, Microsoft Entra ID and Google Workspace. SCIM "
        "provisioning creates and removes members within 10 minutes of a change in the "
        "identity provider.",
    ),
    # --- Release notes --------------------------------------------------------
    Document(
        "release-4.0",
        "Larkspur 4.0 release notes",
        "release-notes",
        "Larkspur 4.0 was released on March 12, 2024. Version 4.0 introduced selective sync "
        "on all plans and a redesigned web app. With version 4.0 the minimum supported macOS "
        "version became macOS 12 Monterey.",
    ),
    Document(
        "release-4.2",
        "Larkspur 4.2 release notes",
        "release-notes",
        "Larkspur 4.2 was released on July 30, 2024. Version 4.2 added the lark command-line "
        "tool and LAN sync. Since version 4.2, large uploads resume after an interruption "
        "instead of starting over.",
    ),
    Document(
        "release-4.3",
        "Larkspur 4.3 release notes",
        "release-notes",
        "Larkspur 4.3 was released on October 8, 2024. Version 4.3 raised the offline change "
        "queue from 20,000 to 50,000 changes. Version 4.3 also fixed a bug that created "
        "conflicted copies twice.",
    ),
    Document(
        "release-5.0",
        "Larkspur 5.0 release notes",
        "release-notes",
        "Larkspur 5.0 was released on January 21, 2025. Version 5.0 removed SMS as a second "
        "factor and added FIDO2 security keys. Version 5.0 introduced customer-managed "
        "encryption keys on the Business plan. Windows 8.1 is no longer supported from "
        "version 5.0.",
    ),
    Document(
        "release-5.1",
        "Larkspur 5.1 release notes",
        "release-notes",
        "Larkspur 5.1 was released on April 15, 2025. Version 5.1 added SCIM provisioning and "
        "per-folder sharing policies. In version 5.1, folders with more than 1 million files "
        "sync up to 3 times faster than in version 5.0.",
    ),
    Document(
        "release-5.1.2",
        "Larkspur 5.1.2 security update",
        "release-notes",
        "Larkspur 5.1.2 was released on May 6, 2025 as a security update. Version 5.1.2 fixes "
        "advisory LSA-2025-004, in which a crafted sharing link revealed the name of the file "
        "owner. Fernhollow recommends that all customers update to version 5.1.2 or later.",
    ),
    Document(
        "release-5.2",
        "Larkspur 5.2 release notes",
        "release-notes",
        "Larkspur 5.2 was released on September 2, 2025. Version 5.2 added the Activity "
        "panel, which shows the last 30 days of changes in a shared folder. With version 5.2 "
        "the mobile app can keep folders available offline.",
    ),
    # --- Pricing, limits and support policies ---------------------------------
    Document(
        "pricing-plans",
        "Plans and prices",
        "policy",
        "Larkspur has three plans: Solo, Team and Business. The Solo plan costs $6 per month "
        "for one user. The Team plan costs $11 per user per month, with a minimum of 3 users. "
        "The Business plan costs $19 per user per month and adds single sign-on and "
        "customer-managed keys. Prices are in US dollars and exclude sales tax.",
    ),
    Document(
        "pricing-storage",
        "Storage and file size limits",
        "policy",
        "The Solo plan includes 1 TB of storage. The Team plan includes 2 TB of storage per "
        "user, pooled across the team. The Business plan includes 5 TB of storage per user, "
        "pooled across the team. The largest single file is 50 GB on Solo, 100 GB on Team "
        "and 250 GB on Business.",
    ),
    Document(
        "pricing-billing",
        "Billing and discounts",
        "policy",
        "Paying annually saves 15% compared with monthly billing. Invoices are issued on the "
        "first day of each billing period and are payable within 30 days. Registered "
        "charities and schools receive a 40% discount on the Team plan. Extra storage can be "
        "added in blocks of 1 TB for $8 per month.",
    ),
    Document(
        "policy-refunds",
        "Refund policy",
        "policy",
        "New subscriptions can be cancelled for a full refund within 30 days of the first "
        "payment. After the first 30 days, annual plans are refunded pro rata for whole "
        "unused months. Monthly plans are not refunded after the first 30 days.",
    ),
    Document(
        "policy-cancellation",
        "Cancellation and data retention",
        "policy",
        "After a subscription is cancelled, the account stays readable for 45 days. During "
        "those 45 days the account is read-only and files can still be downloaded. After the "
        "45 days, all files and versions are deleted permanently within 7 days.",
    ),
    Document(
        "policy-support",
        "Support channels and hours",
        "policy",
        "Support is available by email on all plans and by live chat on the Team and "
        "Business plans. Live chat is staffed Monday to Friday from 08:00 to 20:00 UTC. "
        "Business customers can also reach phone support 24 hours a day during outages.",
    ),
    Document(
        "policy-response-times",
        "Support response times",
        "policy",
        "Fernhollow answers support emails from Solo customers within 2 business days. "
        "Tickets from Team customers are answered within 8 business hours. Urgent tickets "
        "from Business customers are answered within 1 hour, around the clock.",
    ),
    Document(
        "policy-uptime",
        "Uptime commitment",
        "policy",
        "The Business plan includes a 99.9% monthly uptime commitment. If monthly uptime "
        "falls below 99.9%, the customer receives a credit of 10% of the monthly fee. If "
        "monthly uptime falls below 99.0%, the credit rises to 25% of the monthly fee. "
        "Credits must be requested within 30 days of the end of the month.",
    ),
    Document(
        "policy-version-support",
        "Version support policy",
        "policy",
        "Each major version of Larkspur receives security updates for 18 months after its "
        "release. Larkspur 4.x therefore receives security updates until September 2025. "
        "Desktop clients older than version 4.0 can no longer connect to the service since "
        "February 1, 2025.",
    ),
    Document(
        "policy-data-location",
        "Data location",
        "policy",
        "Customer files are stored in the region chosen at sign-up: the United States, the "
        "European Union or Australia. The European Union region uses data centres in "
        "Frankfurt and Dublin. Moving an existing team to another region is done by support "
        "and takes up to 5 business days.",
    ),
    Document(
        "company-about",
        "About Fernhollow Software",
        "policy",
        "Larkspur is made by Fernhollow Software, founded in 2016 in Leeds. The chief "
        "executive of Fernhollow Software is Maren Okafor. Fernhollow publishes the service "
        "status of Larkspur on its status page.",
    ),
)

DOCUMENTS_BY_ID: Mapping[str, Document] = {doc.id: doc for doc in DOCUMENTS}

# Plausible statements that no document makes. Each carries a specific detail
# (a figure, a name, a feature) so the fault is a realistic hallucination, not
# gibberish.
UNSUPPORTED: Mapping[str, tuple[str, ...]] = {
    "manual-install": (
        "The desktop app also runs on ChromeOS through the Linux container.",
        "An offline installer of 1.2 GB is available for air-gapped networks.",
    ),
    "manual-sync-folders": (
        "External USB drives can be synced as long as they stay plugged in for 24 hours.",
    ),
    "manual-selective-sync": (
        "Excluded folders are removed from the device automatically after 7 days.",
    ),
    "manual-versioning": (
        "Version history can be extended to 10 years with the Archive add-on for $4 per user.",
    ),
    "manual-trash": ("Fernhollow support can recover emptied files for a fee of $49 per request.",),
    "manual-sharing": ("Sharing links on the Solo plan are limited to 25 downloads in total.",),
    "manual-2fa": ("Backup codes can also be printed from the mobile app under Security keys.",),
    "manual-encryption": ("Encryption keys are escrowed with an independent notary in Zurich.",),
    "manual-offline": ("Conflicted copies are merged automatically for Word and Excel documents.",),
    "manual-mobile": ("A tablet edition of the mobile app supports split-screen on iPadOS 15.",),
    "manual-cli": ("The command lark sync --force re-uploads every file in the folder.",),
    "manual-api": (
        "Enterprise API tokens are allowed 6,000 requests per minute on request.",
        "Each API response includes a header with the remaining daily quota of 250,000 calls.",
    ),
    "manual-bandwidth": ("LAN sync encrypts traffic with a per-device WireGuard tunnel.",),
    "manual-roles": ("Teams can appoint up to 3 co-owners who share billing rights.",),
    "manual-sso": ("Single sign-on is also offered on the Team plan for an extra $2 per user.",),
    "release-4.0": ("Version 4.0 also shipped a native app for Apple silicon Macs.",),
    "release-4.2": ("Version 4.2 introduced end-to-end encrypted vaults for the Business plan.",),
    "release-4.3": ("Version 4.3 cut the memory use of the desktop app by 40%.",),
    "release-5.0": ("Version 5.0 was the first release to support passkeys on Android.",),
    "release-5.1": ("Version 5.1 added a dark theme to the web app.",),
    "release-5.1.2": ("The vulnerability was reported by the researcher Tomasz Wielgus.",),
    "release-5.2": ("Version 5.2 also added real-time co-editing of spreadsheets.",),
    "pricing-plans": (
        "A free plan with 5 GB of storage is available for personal use.",
        "Prices are guaranteed not to rise for the first 3 years of a subscription.",
    ),
    "pricing-storage": ("Unused storage rolls over to the next month for up to 2 months.",),
    "pricing-billing": (
        "Customers who pay by bank transfer receive an extra 2% discount.",
        "Startups younger than 2 years receive 6 months free on the Business plan.",
    ),
    "policy-refunds": ("Refunds are paid back within 3 business days by PayPal.",),
    "policy-cancellation": (
        "A cancelled account can be reactivated for a fee of $15 within the first year.",
    ),
    "policy-support": ("Weekend chat support is available for Team customers from 10:00 UTC.",),
    "policy-response-times": ("Every Business customer has a named account manager in Leeds.",),
    "policy-uptime": ("The uptime commitment on the Team plan is 99.5% per quarter.",),
    "policy-version-support": ("Version 3.9 receives extended support for government customers.",),
    "policy-data-location": ("A Canadian region in Montreal opened for new teams in 2025.",),
    "company-about": ("Fernhollow Software employs about 350 people in four offices.",),
}
