__version__ = "0.5.99.dev0+standin"
