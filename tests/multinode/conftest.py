from tests.support.netns import netns_lab  # noqa: F401  (session fixture: 4 namespaces, an sshd in each)
