import os

import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import GridSearchCV

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
grid = {"n_estimators": [500, 1000, 2000], "max_depth": [None, 2, 3, 4, 5, 6], "min_samples_leaf": [1, 2, 3, 4, 5]}
search = GridSearchCV(RandomForestClassifier(random_state=0), grid, cv=10, n_jobs=1)
search.fit(train[feats], train["species"])
sub = pd.DataFrame(search.predict_proba(test[feats]), columns=search.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
