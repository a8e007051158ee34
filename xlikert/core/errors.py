"""Exceptions raised by xlikert.

Every error a user can trigger with bad input is a :class:`XlikertError`, which
is a :class:`ValueError`, so ``except ValueError`` keeps working. The message
always names what is wrong and, where it applies, the offending coordinates,
file, item or field.
"""

from __future__ import annotations

__all__ = [
    "AnswerLabelError",
    "CodecError",
    "CollectionError",
    "ConfigError",
    "DesignError",
    "ElicitationLevelError",
    "FormatError",
    "FormatNotShownError",
    "InputTypeError",
    "InternalError",
    "InvalidPMFError",
    "LabelMappingError",
    "NominalItemError",
    "TemplateSyntaxError",
    "UnknownNameError",
    "XlikertError",
]


class XlikertError(ValueError):
    """Base class of every input error raised by xlikert."""


class InvalidPMFError(XlikertError):
    """A PMF is negative, NaN, not normalised, or on a malformed score axis."""


class InputTypeError(XlikertError, TypeError):
    """An argument has the wrong type (e.g. a numpy array where a DataArray is needed).

    Also a :class:`TypeError`, so ``except TypeError`` keeps working.
    """


class UnknownNameError(XlikertError, KeyError):
    """A name that is not there: an unknown factor, item, format, kernel or data set.

    Also a :class:`KeyError`, so ``except KeyError`` keeps working. The message
    names the unknown name, where it was looked up and the names there are; unlike
    a plain :class:`KeyError` it is not quoted.

    Examples
    --------
    >>> from xlikert.design import builtin_format
    >>> builtin_format("likert")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.UnknownNameError: no built-in format 'likert'; built-in: original, ...
    """

    def __str__(self) -> str:
        """The message as given, not quoted as :class:`KeyError` quotes it.

        Returns
        -------
        str
            The message.
        """
        return BaseException.__str__(self)


class TemplateSyntaxError(XlikertError):
    """A template has a lone brace, a malformed placeholder or an unknown modifier.

    Raised by :meth:`xlikert.design.Template.parse`; the message names the
    character or the placeholder where it is. Loading an instrument or experiment file reports it as a
    :class:`ConfigError` naming the file and field.
    """


class CodecError(XlikertError):
    """A text in a results file that xlikert's encoders did not write, or a corrupt one.

    Raised by :func:`xlikert.core.codecs.decode_token_ids` and
    :func:`xlikert.core.codecs.decode_text`; the message names the codec expected and
    shows the start of the text.
    """


class DesignError(XlikertError):
    """The experimental design is not usable (not fully crossed, too few levels, ...)."""


class NominalItemError(DesignError):
    """A function that needs ordered options got a nominal item (vote choice, religion).

    The message names the nominal items; leave them out (``pmf.sel(item=~pmf.nominal)``).
    """


class ConfigError(XlikertError):
    """An instrument or experiment file is malformed; the message names file and field."""


class CollectionError(XlikertError):
    """Collection cannot proceed (unknown model, checksum mismatch, no digit tokens, ...)."""


class ElicitationLevelError(CollectionError):
    """A model's backend cannot read an elicitation level the run asks for (named, with the
    backend and the reason), raised before anything loads."""


class FormatError(ConfigError):
    """A response format (a level of a factor of kind ``format``) is not usable."""


class LabelMappingError(FormatError):
    """A format's answer labels are not a bijection onto the scale's ``score`` values."""


class FormatNotShownError(FormatError):
    """An experiment varies the response format but no prompt shows the answer labels."""


class AnswerLabelError(FormatError, CollectionError):
    """A format's answer labels are not single tokens for a model's tokenizer."""


class InternalError(RuntimeError):
    """A result failed one of xlikert's own consistency checks: a bug, not bad input.

    Raised, for example, when the certified lower bound of Multivariate
    Consensus exceeds its upper bound. Please report it with the input.
    """
