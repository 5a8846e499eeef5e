"""``distrepro reproduce <paper>``: choose the arms, load their configs, train them, then report (one module each)."""
