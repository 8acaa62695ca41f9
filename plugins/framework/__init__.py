"""The scheduling framework: the conf, the plugins by tier and their extension points, the
session of one pass, and the memo that lets a pass skip what did not change."""
