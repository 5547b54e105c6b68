"""The experiments (view 14): every experiment's report, the runs folder's or the shipped
one (report), and an experiment's --quick form run from the page (quickrun, views 11 and
14)."""
