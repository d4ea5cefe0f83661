"""The one error a reader raises: a message for the user naming the endpoint or model and what to do."""


class ReaderError(RuntimeError):
    unreachable = False


class ReaderUnreachable(ReaderError):
    """The endpoint did not answer at all (no server there, or not at that address)."""

    unreachable = True
