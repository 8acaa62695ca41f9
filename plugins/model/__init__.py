"""What plugins and actions share: gangs, queue shares, feasibility, placement, victims."""
