"""Board tops of compiled models (``hwcosim compile``): every engine of one model behind one host bridge."""
