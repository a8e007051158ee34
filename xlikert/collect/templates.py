"""From ``(system, user)`` text to the exact token ids a local engine runs.

Shared by the backends that tokenise themselves (transformers, in-process vLLM),
so both send a model the same ids (paper section "Constraint"; the protocol of the
docs' collection page):

* chat models: the tokenizer's chat template with the generation prompt; the
  templated text is tokenised with ``add_special_tokens=False`` (the template
  already holds BOS where the model wants it) and a doubled leading BOS is removed;
* models without a chat template (base models) get :data:`PLAIN_FORMAT`, preceded
  by the BOS token when the tokenizer adds one;
* the stored ``prompt`` is always the exact text, tokenised without added tokens;
* a chat template with a thinking switch (it reads ``enable_thinking``, as Qwen3's
  does) is rendered with ``enable_thinking=False``: the answer is read right after
  the prompt, with thinking off. Reasoning mode (:mod:`xlikert.collect.reasoning`)
  renders it with ``enable_thinking=True``.
"""

from __future__ import annotations

from typing import Any

from ..errors import CollectionError

__all__ = ["PLAIN_FORMAT", "PLAIN_REASONING_FORMAT", "PromptTemplate"]

#: Prompt format for models without a chat template (base models).
PLAIN_FORMAT = "{system}\n\n{user}\nAnswer:"
#: The same in reasoning mode: the model writes its thought from the new line on.
PLAIN_REASONING_FORMAT = "{system}\n\n{user}\n"


class PromptTemplate:
    """Renders and tokenises prompts for one tokenizer.

    Parameters
    ----------
    tokenizer
        A transformers tokenizer.
    name
        The model's name, for messages.
    prompt_format
        ``"chat"``, ``"plain"`` or None (chat when the tokenizer has a template).

    Examples
    --------
    >>> t = PromptTemplate(tok, "m")  # doctest: +SKIP
    >>> t.encode(t.render("Rate 1-7.", "I like tea."))  # doctest: +SKIP
    [1, 9690, ...]
    """

    def __init__(self, tokenizer: Any, name: str, prompt_format: str | None = None):
        self.tokenizer = tokenizer
        self.name = name
        fmt = prompt_format or ("chat" if tokenizer.chat_template else "plain")
        if fmt not in ("chat", "plain"):
            raise CollectionError(
                f"model {name!r}: prompt_format must be 'chat' or 'plain', got {fmt!r}"
            )
        if fmt == "chat" and not tokenizer.chat_template:
            raise CollectionError(
                f"model {name!r}: prompt_format='chat' but the tokenizer has no chat template"
            )
        self.format = fmt
        self.system_merged = False
        source = tokenizer.chat_template if fmt == "chat" else None
        #: True when the chat template reads ``enable_thinking`` (a thinking switch).
        self.thinking_switch = isinstance(source, str) and "enable_thinking" in source

    def __repr__(self) -> str:
        return f"<PromptTemplate {self.name!r} format={self.format}>"

    @property
    def description(self) -> str:
        if self.format == "plain":
            return PLAIN_FORMAT
        return "chat template, add_generation_prompt=True" + (
            ", enable_thinking=False (True in reasoning mode)" if self.thinking_switch else ""
        )

    def render(
        self, system: str, user: str, *, thinking: bool = False, reasoning: bool = False
    ) -> str:
        """The exact text sent to the model for one (system, user) pair.

        ``thinking`` is passed to a template with a thinking switch as
        ``enable_thinking`` (other templates and the plain format ignore it);
        ``reasoning`` renders the plain format without its answer prefix
        (:data:`PLAIN_REASONING_FORMAT`), for a model that thinks first.
        """
        tok = self.tokenizer
        if self.format == "plain":
            fmt = PLAIN_REASONING_FORMAT if reasoning else PLAIN_FORMAT
            return self._plain_bos() + fmt.format(system=system, user=user)
        kw = {"enable_thinking": bool(thinking)} if self.thinking_switch else {}
        msgs = [{"role": "user", "content": user}]
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        try:
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kw)
        except Exception as exc:  # template without a system role
            if not system:
                raise CollectionError(f"model {self.name!r}: chat template failed: {exc}") from exc
            merged = [{"role": "user", "content": f"{system}\n\n{user}"}]
            self.system_merged = True
            return tok.apply_chat_template(merged, tokenize=False, add_generation_prompt=True, **kw)

    def _plain_bos(self) -> str:
        # The plain format starts with BOS exactly when the tokenizer itself adds one.
        tok = self.tokenizer
        if tok.bos_token is None:
            return ""
        ids = tok("x", add_special_tokens=True)["input_ids"]
        return tok.bos_token if ids and ids[0] == tok.bos_token_id else ""

    def encode(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (no duplicated BOS)."""
        tok = self.tokenizer
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        bos = tok.bos_token_id
        if bos is not None and len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
            ids = ids[1:]
        if not ids:
            raise CollectionError(f"model {self.name!r}: prompt {text!r} encodes to no tokens")
        return ids
