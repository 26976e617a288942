"""The locales a text's languages are named by, and told among (``[di] languages``,
``docintel.languages``): what the configuration may list. It imports nothing, so that
the configuration can check its section.
"""

from __future__ import annotations

SIMPLIFIED, TRADITIONAL = "zh-Hans", "zh-Hant"
# the locales a configuration may list (``[di] languages``): the scripts RapidOCR reads
# (its recognisers: Chinese, Latin, Japanese, Korean, Cyrillic, Arabic,
# Devanagari, Tamil, Telugu, Thai, Greek) and languages lingua tells apart in them
LOCALES = (SIMPLIFIED, TRADITIONAL, "ja", "ko",
           "en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "nb", "fi", "pl", "cs", "sk",
           "hu", "ro", "hr", "sl", "tr", "vi", "id", "ms", "ca", "et", "lv", "lt",
           "ru", "uk", "be", "bg", "sr", "mk", "kk", "mn",
           "ar", "fa", "ur", "hi", "mr", "ta", "te", "th", "el")
# the default: a language for each script RapidOCR reads, so that each is told by
# its characters and no model is loaded (10 MB in all, against 210 MB with six more
# Latin languages of Europe); a Latin line is English
DEFAULT = (SIMPLIFIED, TRADITIONAL, "en", "ja", "ko", "ru", "ar", "hi", "ta", "te", "th", "el")


def told_apart(locales) -> int:
    """How many languages ``locales`` name: zh-Hans and zh-Hant are one, Chinese."""
    return len({base(locale) for locale in locales})


def base(locale: str) -> str:
    """The language of a locale, without its script: zh of zh-Hans."""
    return locale.split("-")[0]
