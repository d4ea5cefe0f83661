"""The one error convention of the five command-line tools (corpusbuild, indexer, searchd, refkit, medsnip).

A problem the user can fix is one line on stderr, `error: WHAT (WHERE): WHAT TO DO`, and an exit status
that says its class (EXIT_CODES, the table docs/operations/errors.md prints); a Python traceback appears only with
`--debug`. Every tool's group is a ToolGroup, so a command raises CommandError (or a subclass) and never
formats or exits by itself.
"""

from __future__ import annotations

import os
import sys
import traceback
from enum import IntEnum

import click


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # an input, a record or a folder's state stopped the job; the line names which
    USAGE = 2  # an option or argument refused before any work (click's own usage errors use 2 as well)
    UNREACHABLE = 3  # a server the command calls (searchd, a reader endpoint) did not answer
    INTERNAL = 70  # a bug (sysexits' EX_SOFTWARE): the line says so; --debug prints the traceback
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, what a shell reports for a job stopped that way


EXIT_CODES: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.FAILED: "an input, a record or a folder's state stopped the job (missing or unreadable file, "
    "bad record, folder busy or changed since its build); the line names the file, line and field",
    ExitCode.USAGE: "an option or argument is wrong (refused before any work, by the command or by the server it asks)",
    ExitCode.UNREACHABLE: "a server the command calls (searchd, a reader endpoint, a Ray cluster) cannot be reached",
    ExitCode.INTERNAL: "internal error (a bug): run again with --debug for the traceback and report it",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); no output file was created or replaced "
    "(a resumable job keeps its progress)",
}


class CommandError(click.ClickException):
    """A problem the user can fix: printed as `error: MESSAGE`, exit status `code`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.exit_code = int(code)

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class Unreachable(CommandError):
    """A server that did not answer (the message is the sentence every command uses for it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.UNREACHABLE)


def fail(message: str, code: ExitCode = ExitCode.FAILED):
    """Stop the command with one error line and the exit status of its class."""
    raise CommandError(message, code)


class InputPath(click.Path):
    """click.Path(exists=True) whose refusal is an input problem (exit 1, one `error:` line naming the path
    and the argument or option), not click's usage screen (exit 2): a missing, misplaced or unreadable
    input file is row 1 of the table. ToolGroup gives every such parameter of its commands this type."""

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            raise CommandError(input_path_problem(value, self, param)) from None


def input_path_problem(value, kind: click.Path, param: click.Parameter | None) -> str:
    """What is wrong with an input path click refused, as `PATH: what (ARGUMENT): what to do`."""
    hint = ""
    if param is not None:
        hint = f" ({'/'.join(param.opts) if isinstance(param, click.Option) else param.human_readable_name})"
    path = os.fsdecode(value)
    if not os.path.lexists(path):
        return f"{path}: no such file or directory{hint}; check the path"
    if not os.path.exists(path):
        return f"{path}: a symbolic link to nothing{hint}; check the path"
    if os.path.isdir(path) and not kind.dir_okay:
        return f"{path}: a folder, not a file{hint}; give the file"
    if not os.path.isdir(path) and not kind.file_okay:
        return f"{path}: a file, not a folder{hint}; give the folder"
    return f"{path}: cannot be read{hint} (permission denied)"


def _input_paths(command: click.Command) -> None:
    """Give `command`'s click.Path(exists=True) parameters the InputPath type (same options, same help)."""
    for param in command.params:
        kind = param.type
        if type(kind) is click.Path and kind.exists:
            param.type = InputPath(
                exists=True,
                file_okay=kind.file_okay,
                dir_okay=kind.dir_okay,
                writable=kind.writable,
                readable=kind.readable,
                resolve_path=kind.resolve_path,
                allow_dash=kind.allow_dash,
                path_type=kind.type,
                executable=kind.executable,
            )


def _debug_callback(ctx: click.Context, _param, value: bool) -> None:
    ctx.meta["medsnip.debug"] = value


def _verbose_callback(_ctx: click.Context, _param, value: bool) -> None:
    if value:  # read where models load (medsnip.encoders), in this process and the ones it starts
        os.environ["MEDSNIP_VERBOSE"] = "1"


def _tool_flag(flag: str, envvar: str, callback, help_text: str) -> click.Option:
    """A flag of the tool itself (`refkit --debug noise ...`), also set by its environment variable."""
    return click.Option(
        [flag], is_flag=True, expose_value=False, is_eager=True, envvar=envvar, callback=callback, help=help_text
    )


class ToolGroup(click.Group):
    """A click group that applies the convention to all its commands: --debug, one line per known
    problem (a missing or unreadable input path too: InputPath), Ctrl-C as exit 130, and any other
    exception as an internal error (traceback only with --debug)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.params[:0] = [
            _tool_flag(
                "--debug",
                "MEDSNIP_DEBUG",
                _debug_callback,
                "Print the Python traceback of an error (for reporting a bug).",
            ),
            _tool_flag(
                "--verbose",
                "MEDSNIP_VERBOSE",
                _verbose_callback,
                "Keep third-party progress bars and logs (model loading), which are off by default.",
            ),
        ]

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _input_paths(cmd)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SystemExit:
            raise
        except BaseException as error:
            if ctx.meta.get("medsnip.debug", False):
                traceback.print_exc()
            if isinstance(error, (click.exceptions.Exit, click.ClickException)):
                raise
            if isinstance(error, (KeyboardInterrupt, click.Abort)):
                click.echo(file=sys.stderr)  # past the terminal's ^C
                click.echo(f"error: {EXIT_CODES[ExitCode.INTERRUPTED]}", err=True)
                raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None
            if isinstance(error, OSError):  # a file the command was told to read or write: the OS says what
                where = f"{error.filename}: " if error.filename else ""
                raise CommandError(f"{where}{error.strerror or error}") from None
            if not isinstance(error, Exception):  # GeneratorExit and the like: not a command's failure
                raise
            name = type(error).__name__
            click.echo(f"error: internal error, {name}: {error} (run again with --debug for the traceback)", err=True)
            raise click.exceptions.Exit(ExitCode.INTERNAL) from None
