"""Moving from the reference server: reading its databases read-only, importing them."""
