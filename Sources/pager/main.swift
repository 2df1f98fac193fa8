print("pager")
