"""dynspec: is my SGLang patch live?"""

__version__ = "0.1.0"
