"""A cross-machine compare-and-swap point for stage pointers: a git ref per pointer, moved by a
non-forced push (builder.toml ``promotion_remote``; docs/promotion.md "Consistency guarantees").

The OCI distribution API has no conditional PUT, so two machines can both re-read a stage tag,
both find it unchanged and both write it. A git server serialises ref updates: a push that is not
a fast-forward of the ref as the server holds it is rejected atomically ("non-fast-forward";
https://git-scm.com/docs/git-push#_note_about_fast_forwards), which is how GitOps promotion
tools serialise environment changes. Each pointer ``registry/repository:tag`` has the ref
``refs/builder/pointers/<sha256 of the pointer, 40 hex>``; each state is a commit (empty tree)
whose message names the digest, the pointer and the previous digest, parented on the state it
replaced. Moving a pointer from E to D: fetch the ref, check it names E (or does not exist yet:
the first move under this mode; or already names D: a run stopped after its push, completed
now), commit D on top of it, push without force. A rejected push, or a ref naming another
digest, is PromotionConflictError (exit 32) and the stage tag is not moved. The ref moves before
the tag: a run stopped between the two leaves the ref one move ahead, and only that same
promotion (re-run) can complete it; any other is refused until it is.

The local side is a bare repository under ``<state_dir>/pointer-refs.git`` (created on first
use); every git command runs through :mod:`builder.process`. Errors: PromotionConflictError (32);
ConfigError (2) when git is missing or the remote cannot be reached.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

from builder import process
from builder.errors import ConfigError, PromotionConflictError

if TYPE_CHECKING:
    from pathlib import Path

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree object (SHA-1 object format): every state commit has it."""

_IDENTITY = ("-c", "user.name=builder", "-c", "user.email=builder@localhost")
"""Who the state commits are by (the signed promotion records say who promoted)."""


def pointer_ref(pointer: str) -> str:
    """The git ref of a stage pointer ``registry/repository:tag``."""
    return "refs/builder/pointers/" + hashlib.sha256(pointer.encode()).hexdigest()[:40]


@dataclasses.dataclass(frozen=True)
class PointerRefs:
    """The compare-and-swap point: ``remote`` (any git remote URL or path every promoting machine
    can push to) and ``workdir`` (this machine's bare scratch repository)."""

    remote: str
    workdir: Path

    def _git(self, *args: str) -> tuple[int, str]:
        try:
            proc = process.run(["git", "-C", str(self.workdir), *_IDENTITY, *args], timeout=120)
        except FileNotFoundError as exc:
            raise ConfigError(
                "promotion_remote is set but git is not installed", hint="install git, or unset promotion_remote"
            ) from exc
        return proc.returncode, (proc.stdout or "") + (proc.stderr or "")

    def _ensure(self) -> None:
        if (self.workdir / "HEAD").exists():
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        code, out = self._git("init", "-q", "--bare")
        if code != 0:
            raise ConfigError(f"cannot create {self.workdir} for the pointer refs: {out.strip()}")

    def read(self, pointer: str) -> tuple[str | None, str | None]:
        """(commit, digest) the remote's ref of ``pointer`` names; (None, None) when it has none.
        ConfigError when the remote cannot be read."""
        self._ensure()
        ref = pointer_ref(pointer)
        local = "refs/fetched/" + ref.rsplit("/", 1)[-1]
        code, out = self._git("ls-remote", self.remote, ref)
        if code != 0:
            raise ConfigError(
                f"cannot read the pointer refs at promotion_remote {self.remote}: {out.strip()[-300:]}",
                hint="check the remote URL and your access to it (builder.toml promotion_remote)",
            )
        if not out.strip():
            return None, None
        code, out = self._git("fetch", "-q", "--no-tags", self.remote, f"+{ref}:{local}")
        if code != 0:
            raise ConfigError(f"cannot fetch {ref} from {self.remote}: {out.strip()[-300:]}")
        code, oid = self._git("rev-parse", local)
        code2, message = self._git("log", "-1", "--format=%B", oid.strip())
        if code != 0 or code2 != 0:
            raise ConfigError(f"cannot read {ref} fetched from {self.remote}")
        digest = next((line.split(" ", 1)[1] for line in message.splitlines() if line.startswith("digest ")), None)
        return oid.strip(), digest

    def swap(self, pointer: str, expected: str | None, new: str) -> str:
        """Move ``pointer``'s ref from ``expected`` to ``new`` (module docstring); returns the new
        commit. PromotionConflictError when the ref names another digest or the push is rejected."""
        parent, held = self.read(pointer)
        if parent is not None and held == new:
            return parent  # this move is already in the ref (a run stopped after its push): complete it
        if parent is not None and held != expected:
            raise PromotionConflictError(
                f"{pointer}: the shared pointer ref at {self.remote} names {held}, not {expected}: another "
                "machine moved (or is moving) this stage; nothing was overwritten",
                expected=expected,
                found=held,
                pointer=pointer,
            )
        message = f"digest {new}\npointer {pointer}\nprevious {expected or 'none'}\n"
        args = ["commit-tree", EMPTY_TREE, "-m", message]
        if parent is not None:
            args[2:2] = ["-p", parent]
        code, commit = self._git(*args)
        if code != 0:
            raise ConfigError(f"cannot write the pointer state for {pointer}: {commit.strip()}")
        code, out = self._git("push", "-q", self.remote, f"{commit.strip()}:{pointer_ref(pointer)}")
        if code != 0:
            raise PromotionConflictError(
                f"{pointer}: the shared pointer ref at {self.remote} moved while we were promoting (push "
                f"rejected: {out.strip()[-200:]}); nothing was overwritten",
                expected=expected,
                pointer=pointer,
            )
        return commit.strip()
