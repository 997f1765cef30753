import os

import pandas as pd
from sklearn.ensemble import RandomForestClassifier

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
ids = test["id"]
test = test.drop(columns=["id"])
X = train.drop(columns=["id", "species"])
model = RandomForestClassifier(n_estimators=50, random_state=0).fit(X, train["species"])
sub = pd.DataFrame(model.predict_proba(test), columns=model.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
