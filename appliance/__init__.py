"""The OCR appliance.

Every process of the appliance imports this package first, so this is where the native
libraries are loaded, llama.cpp's first (``engines.native``, through ``engines``).
"""

import appliance.engines  # noqa: F401
