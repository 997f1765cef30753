import os

import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
model = GradientBoostingClassifier(n_estimators=100, max_depth=2, num_leaves=15)
model.fit(train[feats], train["species"])
sub = pd.DataFrame(model.predict_proba(test[feats]), columns=model.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
