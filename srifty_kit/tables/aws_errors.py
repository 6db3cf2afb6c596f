"""What a boto3 failure means for the user, shared by every AWS caller (the catalog refresh,
the Athena ledger). This module only sorts errors into what the user can act on; each caller
words its own message and fix.

botocore is imported here: import this module only where AWS is about to be called.
"""

from __future__ import annotations

import re

from botocore import exceptions as bx

# error codes meaning "these credentials do not work": renew or replace them
CREDENTIAL_CODES = frozenset(
    {
        "AuthFailure",
        "RequestExpired",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "MissingAuthenticationToken",
    }
)
PERMISSION_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
THROTTLE_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
# no credentials could be found or read
MISSING_CREDENTIALS = (
    bx.NoCredentialsError,
    bx.PartialCredentialsError,
    bx.CredentialRetrievalError,
)
# an SSO login that has lapsed
EXPIRED_LOGIN = (bx.SSOTokenLoadError, bx.UnauthorizedSSOTokenError, bx.TokenRetrievalError)
# the endpoint could not be reached or did not answer
ENDPOINT_ERRORS = (
    bx.EndpointConnectionError,
    bx.ConnectTimeoutError,
    bx.ReadTimeoutError,
    bx.ConnectionClosedError,
    bx.SSLError,
)


def error_of(response: dict) -> tuple[str, str]:
    """The AWS error code and message of a ClientError's response; from the body when an
    endpoint answered a JSON API with an XML error (botocore then reports only the HTTP
    status as the code)."""
    error = response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    if code.isdigit() and "<Code>" in message:
        found = re.search(r"<Code>([^<]+)</Code>", message)
        said = re.search(r"<Message>([^<]*)</Message>", message)
        code = found.group(1) if found else code
        message = said.group(1) if said else ""
    return code, " ".join(message.split())
