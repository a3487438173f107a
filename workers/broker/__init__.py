"""The broker side: kombu's Redis transport with apportion's fixes."""
