"""The one error a reader raises: a message for the user naming the endpoint or model and what to do."""


class ReaderError(RuntimeError):
    pass
