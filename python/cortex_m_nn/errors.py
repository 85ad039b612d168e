"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class CompileError(Exception):
    """A problem with the user's input or model; the message names the fix."""
