"""The YARN backend's submitting side: what runs where the user runs ``subm`` (the request, its
rules, the travelling environment, skein's driver, status and logs over REST)."""
