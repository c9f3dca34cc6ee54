"""Reference solutions to the notebooks' exercises: try the exercise first!"""
