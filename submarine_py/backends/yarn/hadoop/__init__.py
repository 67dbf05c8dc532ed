"""Where the Hadoop cluster is and how to call it, for the submitting side and the AM alike: its
configuration (``conf.py``), the ResourceManager's, NodeManagers' and NameNodes' web APIs, who calls
(Kerberos, SPNEGO)."""
