"""The longest tests first: with two workers (decision 49), a long test collected last kept one worker busy for
minutes after the other had run out of work. Tests marked `slow` start first, then those marked `compile`; the
rest keep their order (each test stands alone, so the order changes no result)."""


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("compile") else 2

    items.sort(key=rank)  # stable: the collection order within each rank
