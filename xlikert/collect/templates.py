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

from collections.abc import Sequence

from ..core.errors import CollectionError
from .foreign import Tokenizer

__all__ = ["PLAIN_FORMAT", "PLAIN_REASONING_FORMAT", "PLAIN_TURN", "PromptTemplate"]

#: Prompt format for models without a chat template (base models).
PLAIN_FORMAT = "{system}\n\n{user}\nAnswer:"
#: The same in reasoning mode: the model writes its thought from the new line on.
PLAIN_REASONING_FORMAT = "{system}\n\n{user}\n"
#: An earlier question and the model's answer in a plain-format conversation (sequential
#: administration): written before the question asked, inside :data:`PLAIN_FORMAT`'s user.
PLAIN_TURN = "{user}\nAnswer: {answer}\n\n"


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

    def __init__(self, tokenizer: Tokenizer, name: str, prompt_format: str | None = None):
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
        if self.format == "plain" and reasoning:
            return self._plain_bos() + PLAIN_REASONING_FORMAT.format(system=system, user=user)
        return self.render_conversation(system, (), user, thinking=thinking)

    def render_conversation(
        self,
        system: str,
        turns: Sequence[tuple[str, str]],
        user: str,
        *,
        thinking: bool = False,
    ) -> str:
        """The exact text of a conversation that ends in a question to answer.

        Sequential administration (:mod:`xlikert.collect.context`): ``system`` as
        the system prompt, each earlier ``(question, answer)`` of ``turns`` as a
        user turn and the model's reply (the chat template renders the reply and
        its end of turn), then ``user`` with the generation prompt. Without turns
        this is :meth:`render`. The plain format writes each earlier turn as
        :data:`PLAIN_TURN`; a chat template without a system role gets the system
        prompt merged into the first user turn, as :meth:`render` does; only the template's
        own refusal (a ``jinja2.TemplateError``) is taken to mean that, any other error
        is raised.

        Examples
        --------
        >>> t = PromptTemplate(tok, "m")  # doctest: +SKIP
        >>> text = t.render_conversation("Rate 1-7.", [("I like tea.", "6")], "I like coffee.")  # doctest: +SKIP
        >>> text.endswith("<|im_start|>assistant" + chr(10))  # doctest: +SKIP
        True
        """
        tok = self.tokenizer
        if self.format == "plain":
            earlier = "".join(PLAIN_TURN.format(user=u, answer=a) for u, a in turns)
            return self._plain_bos() + PLAIN_FORMAT.format(system=system, user=earlier + user)
        kw = {"enable_thinking": bool(thinking)} if self.thinking_switch else {}
        msgs = []
        for question, answer in turns:
            msgs += [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
        msgs.append({"role": "user", "content": user})
        from jinja2 import TemplateError  # what a chat template raises (raise_exception)

        try:
            head = [{"role": "system", "content": system}] if system else []
            return tok.apply_chat_template(
                head + msgs, tokenize=False, add_generation_prompt=True, **kw
            )
        except TemplateError as exc:  # a template without a system role refuses one
            if not system:
                raise CollectionError(f"model {self.name!r}: chat template failed: {exc}") from exc
            msgs[0] = {"role": "user", "content": f"{system}\n\n{msgs[0]['content']}"}
            self.system_merged = True
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kw)

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
