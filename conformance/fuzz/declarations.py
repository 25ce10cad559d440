"""What a backend's cited declarations excuse in generated text (the gate's rule, applied to fuzz).

Fuzz inputs have no probe ids, so only cause declarations apply -- the rule is
:mod:`conformance.core.declared`'s: a code point is *declared for B* when B has a
``unicode_tables`` declaration and splits text around it differently from the
reference (measured, cached), and ``'ſ`` is declared when B has a
``long_s_contraction`` declaration. :meth:`UnicodeDeclarations.strip` removes what is
declared, so a divergence that survives the strip is undeclared. A *trusted* difference is
declared by a ``control_text`` declaration when the backend's ids are exactly the reference's
with the promoted token texts split out as their ids (:meth:`UnicodeDeclarations.control_text_for`:
the whole difference explained, so nothing can hide behind it).

Out of scope: deciding whether an example diverges (``conformance.fuzz.oracle``) and
classifying it (``conformance.fuzz.compare``).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.core.declared import CONTROL_TEXT, LONG_S, LONG_S_TEXT, Declarations
from conformance.core.protocol import Backend


@dataclass(frozen=True)
class UnicodeDeclarations:
    """What a backend's cause declarations excuse in generated text -- the shared rule of
    :mod:`conformance.core.declared`: code points the backend splits differently (``unicode_tables``)
    and ``'ſ`` (``long_s_contraction``)."""

    declarations: Declarations
    backend: Backend
    declaration: str | None  # id of the backend's unicode_tables declaration, if any
    long_s: str | None = None  # id of its long_s_contraction declaration, if any
    control_text: str | None = None  # id of its control_text declaration (trusted), if any

    @classmethod
    def for_backend(cls, declarations: Declarations, backend: Backend) -> UnicodeDeclarations:
        tables = declarations.has_cause(backend, "encode")
        long_s = declarations.has_cause(backend, "encode", LONG_S)
        control = declarations.has_cause(backend, "trusted", CONTROL_TEXT)
        return cls(
            declarations,
            backend,
            tables.id if tables else None,
            long_s.id if long_s else None,
            control.id if control else None,
        )

    def control_text_for(self, text: str) -> str | None:
        """The control_text declaration, when it explains ``backend``'s trusted ids on ``text``."""
        if self.control_text is None:
            return None
        return self.control_text if self.declarations.explained_by_control_text(self.backend, text) else None

    def declared_by(self, ch: str) -> str | None:
        if self.declaration is None:
            return None
        return self.declaration if self.declarations.drifts(self.backend, ch) else None

    def strip(self, text: str) -> str:
        if self.long_s is not None:
            text = text.replace(LONG_S_TEXT, "'")
        if text.isascii() or self.declaration is None:
            return text
        return "".join(ch for ch in text if self.declared_by(ch) is None)

    def first_declaration(self, text: str) -> str | None:
        found = next((d for ch in text if (d := self.declared_by(ch)) is not None), None)
        if found is None and self.long_s is not None and LONG_S_TEXT in text:
            return self.long_s
        return found
