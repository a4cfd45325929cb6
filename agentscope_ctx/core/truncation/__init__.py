"""The first truncation: a text cut to a byte budget with its notice, an output offloaded."""
